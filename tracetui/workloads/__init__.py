"""The bundled Linear / GeGLU-MLP ladder and the recorder that profiles it (needs torch)."""
