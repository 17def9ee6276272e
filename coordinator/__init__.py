"""Coordinator service (analyst side): runs federated studies over the centers' safe releases.

It never sees raw data. It talks to centers only through the wire models of
``shared/protocol.py`` and does the protocols' arithmetic with the functions of ``shared/`` on
released numbers.

Layers, each importing only from those below it::

    main.py, __main__.py     the app factory, ``python -m coordinator`` (``fedstats_service``)
    api/                     dependencies and one router per resource
    services.py, runner.py,  what one process holds, studies in the background, the centers'
    registry.py              health and budgets
    study.py, results.py,    how a study runs, its result from the protocols' outputs, figures
    figures.py
    protocols/               the federated protocols, over ``CenterPort``s
    client.py, local.py,     the ports: over HTTP, the real center app in-process, recorded in
    recording.py             the store
    ports.py, db.py          what a center answers; the store
    models.py, core/         the analyst API's models and vocabulary (a leaf); settings, errors
"""
