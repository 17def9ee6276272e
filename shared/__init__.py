"""fedstats' pure statistical core.

Arrays and explicit parameters in, small result objects out. Nothing in this package reads
settings, the environment, files or the network; randomness always arrives as a
``numpy.random.Generator``. The services ``center_agent`` and ``coordinator`` and the in-process
simulations all call the same functions.
"""
