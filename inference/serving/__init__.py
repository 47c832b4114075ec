"""Serving the learned policy on NVIDIA Triton (issue 4 point 5): PyTriton's tritonserver, Python backend.

- :mod:`inference.serving.server` — start Triton with the three models (``semsched serve``);
- :mod:`inference.serving.repository` — their model repository (configurations, tensors);
- :mod:`inference.serving.python_model` — the Python-backend model each runs in its stub;
- :mod:`inference.serving.process` — the same as a subprocess, ready-checked, stopped by PID;
- :mod:`inference.serving.models`, :mod:`inference.serving.predictor` — the models' callables
  (``policy``, ``job_encoder``, ``predictor``);
- :mod:`inference.serving.host` — the served version, swapped when ``models/latest`` moves;
- :mod:`inference.serving.client` — :class:`TritonBackend`, the worker's side (gRPC, deadline).

Nothing here is imported by ``inference`` itself: tritonclient and the tritonserver binary are
used only when serving.
"""
