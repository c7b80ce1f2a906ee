"""The generated parts of the documentation site (``python -m docs_gen``; ``--check`` only compares).

Each reference page keeps its hand-written text around one generated block, marked
``<!-- generated:NAME begin ... -->`` / ``<!-- generated:NAME end -->``:

* ``cli``: docs/reference/cli.md, from the argparse parsers of :mod:`cli.main`;
* ``config``: docs/reference/config.md, from the pydantic configuration models (:mod:`config.model`);
* ``rest``: docs/reference/rest-api.md, from the API application's ``/openapi.json``, which is also
  written whole to docs/reference/openapi.json.

tests/unit/test_docs_generated.py fails when a committed page is not what the code generates.
"""
