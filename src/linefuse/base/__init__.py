"""The base LineFuse ships (src/linefuse/zoo/chart-base), trained in one place: the chart bank
(bank.py) and the charts a GPU window draws on its host's cores (device_charts.py), the batches
degraded on the device (batches.py), `make base` (train.py), a GPU window (window.py, its trace
window_trace.py, its compiled kernels compiled_kernels.py), the scores (scores.py), landing a
window by the paired rule (land.py) and the model card with its ledger (card.py)."""
