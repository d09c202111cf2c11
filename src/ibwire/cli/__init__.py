"""The ``ibwire`` command: one module per verb, each a thin ``run(args)`` over the library."""
