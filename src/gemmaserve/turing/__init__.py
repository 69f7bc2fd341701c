"""The Turing (sm_75) shared-memory clamp for vLLM's Triton unified-attention kernel.

rule.py is the pure tile rule; plugin.py applies it at vLLM start-up; filepatch.py edits an
installed file; status.py says which delivery is active; smem.py asks the real compiler.
Importing this package needs neither torch, triton nor vLLM.
"""
