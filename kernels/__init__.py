"""Hand-written Triton kernels for the bundled MLP ladder.

Installed as ``tracetui.kernels`` (the folder is ``kernels/`` in the repo) so it never shadows the
unrelated ``kernels`` distribution on PyPI. Each kernel sits next to its torch reference.
"""
