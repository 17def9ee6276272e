"""What the coordinator shows of a study: the text summary and HTML report (``report``), the
Methods paragraph (``methods_text``), the CSV/XLSX exports (``exports``), the figures
(``figures``) and the report's flags (``report_flags``) — each a loop over the analyses'
registry (``coordinator.analyses``), every analysis showing its own part — and the formatting
and drawing they share (``rendering``, ``charts``, ``shown``, ``export_parts``, ``notes``,
``citations``, ``wording``), which the analyses use (the layers: ``tests/test_layers.py``)."""
