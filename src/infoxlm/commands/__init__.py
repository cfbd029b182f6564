"""Every ``infoxlm …`` command: its arguments, its help text and the handler that calls the library.

One module per command, named after it (``pretrain.py`` is ``infoxlm pretrain``, ``eval_bucc.py``
is ``infoxlm eval bucc``); :mod:`infoxlm.cli` registers them all. This package sits at the top of
the layers: it imports the library (``train``, ``corpus``, ``eval`` …), and nothing in the library
imports it. Strings from the command line are parsed here, into the library's typed values.
"""
