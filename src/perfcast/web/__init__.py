"""``perfcast serve``: a local web explorer over the CLI's forecasts.

The pages build a form, the server turns the form into the CLI's own argument list
(``perfcast.web.fields``), runs the CLI command in-process (``perfcast.web.runner``) and returns
its ``--json`` output unchanged, so a page, its JSON and its "equivalent command" always agree.
"""
