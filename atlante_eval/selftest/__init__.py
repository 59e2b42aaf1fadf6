"""Selftest: null and reference agents, counter-solutions and mutants prove a suite sound.

:mod:`.core` (``run_selftest``) runs each scenario through the real engine with
stand-in agents; :mod:`.solutions` reads known-good solutions and counter-solutions;
:mod:`.mutants` makes generic cheats; :mod:`.findings` turns trials into findings.
"""
