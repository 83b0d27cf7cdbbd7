"""`tracetui record`: the launcher (launcher.py) and what runs inside the recorded process (boot.py)."""
