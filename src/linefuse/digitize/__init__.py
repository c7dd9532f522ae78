"""Digitize a line chart from its pixels alone: its axes' mappings and its series in data units.

chart.py reads a chart, from axes.py (the plot box, its lines and the tick-label words around
it), calibrate.py (the tick labels read and fitted per axis, linear or log) and series.py (each
series, followed by curves.py's line follower); ocr.py and label_onnx.py read text (Tesseract,
and the small CRNN LineFuse ships, label_reader.py, on ONNX Runtime with label_crops.py's
crops). outputs.py writes what was read; score.py compares it with a generated chart's sidecar.

Nothing is imported here: training imports the label reader and its crops alone, so that a
change to how charts are read does not retrain the model.
"""
