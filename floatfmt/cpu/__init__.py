"""Checking floatfmt against this machine's CPU: the capture of its bf16 / fp16 / int8 units
(``python -m floatfmt.cpu.capture --out DIR``) and the replay of captures against the CPU
presets (``floatfmt.cpu.compare``, ``floatfmt hw-report``).  Nothing here is imported by
``import floatfmt``."""
