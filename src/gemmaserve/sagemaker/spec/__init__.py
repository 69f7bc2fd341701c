"""What a deploy is: the request models, the service's input rules, and what is sent (pure; no AWS call).

``requests`` (one model per action), ``inputs`` (the service's own limits, checked first), ``container``
(the pinned image and AMIs, ``SM_VLLM_*`` ↔ flags, resource names, tags, secret masking).
"""
