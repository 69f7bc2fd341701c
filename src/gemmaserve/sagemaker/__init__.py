"""SageMaker real-time endpoints for Gemma 4 on vLLM: preflight, deploy, watch, invoke, clean up.

Pure parts (env mapping, names, tags, cost, quota arithmetic, diagnosis rules) are
apart from the adapters, which receive boto3 clients from :mod:`.clients`; only
:mod:`.aws` translates botocore errors. Nothing here prints.
"""
