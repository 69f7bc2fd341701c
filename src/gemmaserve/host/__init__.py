"""Probes of this host and of a target Python interpreter, and doctor's verdicts on them.

Probes (memory, disk, gpu, interpreter) do the I/O through injectable sources
and never raise for a failed step: each records the exception text instead.
``checks`` turns probe results into typed verdicts; ``doctor`` wires both.
"""
