# A torch that cannot be imported, first on PYTHONPATH for check_capabilities_without_torch.py: the torch adapter's
# `capabilities` must answer without importing torch (it costs two seconds on every validate).
raise ImportError("check_capabilities_without_torch: `capabilities` imported torch")
