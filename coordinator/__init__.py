"""Coordinator service (analyst side): runs federated studies over the centers' safe releases.

It never sees raw data. It talks to centers only through the wire models of
``shared/protocol.py`` and does the protocols' arithmetic with the functions of ``shared/`` on
released numbers.
"""
