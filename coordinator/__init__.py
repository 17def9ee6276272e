"""Coordinator service (analyst side): runs federated studies over the centers' safe releases.

It never sees raw data. It talks to centers only through the wire models of
``shared/protocol.py`` and does the protocols' arithmetic with the functions of ``shared/`` on
released numbers.

What is where (the layers, each importing only from those below it, are listed once, in
``tests/test_layers.py``, which checks them)::

    main.py, __main__.py     the app factory, ``python -m coordinator`` (``fedstats_service``)
    ui/                      the web console
    api/                     dependencies and one router per resource
    services.py, runner.py,  what one process holds, studies in the background, the centers'
    registry.py              health and budgets
    study.py, quotas.py,     how a study runs, the ε it spends, its catalog checks, its dry run
    catalog.py, plan.py
    reporting/               what is shown of a study: report, Methods text, exports, figures
    analyses/                one module per analysis kind: how it runs and how it is shown
    results.py               a result from the protocols' outputs
    protocols/               the federated protocols, over ``CenterPort``s
    client.py, local.py,     the ports: over HTTP, the real center app in-process, recorded in
    recording.py             the store
    ports.py, db.py          what a center answers; the store
    models/, core/           the analyst API's models, a module per analysis kind (a leaf);
                             settings, errors
"""
