"""Every check a SageMaker deploy goes through, named once (pure): preflight's, before anything is created,
and the wait's early diagnoses, while an endpoint comes up.

A finding carries its check's id and title; a check made per item (an instance type, a region) is
``check.at(item)``, its id ``memory-fit:ml.g6.xlarge`` and its ``where`` the item. docs/sagemaker.md lists
them all (a test keeps the list whole).
"""

from __future__ import annotations

from gemmaserve.findings import Check

MEMORY_FIT = Check("memory-fit", "The model fits the instance type (plan; a SageMaker host has no swap)")
ONE_GPU = Check("one-gpu", "The pool has one GPU type")
CUDA = Check("cuda", "The image's CUDA runs on the host's driver")
TURING_CLAMP = Check("turing-clamp", "The image carries the Turing clamp (T4)")
QUOTA = Check("quota", "The account's quota holds this deploy")
MODEL_ID = Check("model-id", "The checkpoint's repository is on the Hub")
EXECUTION_ROLE = Check("execution-role", "The execution role is in this account and trusts SageMaker")
ROLE_REGIONS = Check("role-regions", "The role may pull the image and write logs in each region")

CANNOT_START_CONTAINER = Check("cannot-start-container", "The container starts on the instance's host")
CAPACITY = Check("capacity", "SageMaker found capacity for the instance type")
FAILED = Check("failed", "The endpoint did not fail")
CONTAINER_CRASHED = Check("container-crashed", "The container log shows no crash")
TRACEBACK_IN_LOG = Check("traceback-in-log", "The container log shows no Python traceback")
PING_STALL = Check("ping-ok-still-creating", "SageMaker follows a container that answers /ping")
NO_LOG_GROUP = Check("no-log-group", "The endpoint has a log group while it is created")

# In the order docs/sagemaker.md lists them.
PREFLIGHT = (MEMORY_FIT, ONE_GPU, CUDA, TURING_CLAMP, QUOTA, EXECUTION_ROLE, ROLE_REGIONS, MODEL_ID)
WAIT = (CANNOT_START_CONTAINER, CAPACITY, FAILED, CONTAINER_CRASHED, TRACEBACK_IN_LOG, PING_STALL, NO_LOG_GROUP)
