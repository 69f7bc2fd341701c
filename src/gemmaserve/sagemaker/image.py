"""The derived T4 image: a Dockerfile FROM the pinned AWS vLLM SageMaker image plus gemmaserve's Turing clamp,
and the CodeBuild buildspec that builds and pushes it (pure text rendering).

The base's entrypoint and every ``SM_VLLM_*`` setting keep working (no ENTRYPOINT
change), so one image serves T4 and L4 variants. The build fails unless the clamp
verifies and the image's torch carries sm_75 kernels.
"""

from __future__ import annotations

import base64

from gemmaserve import __version__
from gemmaserve.sagemaker.container import (
    DEFAULT_IMAGE_TAG,
    TURING_CLAMP_LABEL,
    TURING_TAG_MARK,
)

DEFAULT_REPOSITORY = "gemmaserve-vllm"
# torch.cuda.get_arch_list() needs only a CUDA build of torch, not a visible GPU (it checks
# _is_compiled(), torch 2.13), so it runs on a GPU-less build host; an empty list fails too.
ARCH_CHECK = (
    "import sys, torch; arch = torch.cuda.get_arch_list(); "
    "print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'arch', arch); "
    "sys.exit(0 if 'sm_75' in arch else 'torch in this image has no sm_75 kernels: a T4 cannot run it')"
)


def derived_image_tag(base_tag: str = DEFAULT_IMAGE_TAG, version: str = __version__) -> str:
    """Keeps the base tag as prefix (preflight reads the CUDA level from it) and marks the clamp."""
    return f"{base_tag}-gemmaserve{version}-{TURING_TAG_MARK}"


def default_requirement(version: str = __version__) -> str:
    return f"gemmaserve=={version}"


def render_dockerfile(base_image: str, *, requirement: str | None = None) -> str:
    req = requirement or default_requirement()
    return "\n".join([
        f"FROM {base_image}",
        f'LABEL {TURING_CLAMP_LABEL}="verified" io.gemmaserve.base-image="{base_image}" '
        f'io.gemmaserve.requirement="{req}"',
        "# Keep the image's torch, vLLM and Triton exactly: gemmaserve must not move them.",
        "RUN python3 -m pip freeze | grep -iE '^(torch|vllm|triton)==' > /tmp/gemmaserve-keep.txt \\",
        f"    && python3 -m pip install --no-cache-dir -c /tmp/gemmaserve-keep.txt '{req}' \\",
        "    && rm /tmp/gemmaserve-keep.txt",
        "# The clamp is the vllm.general_plugins entry point pip just installed. The build host has no",
        "# GPU, so state the T4's capability: status exits non-zero unless this image's vLLM is a",
        "# supported release whose kernel source has the shape the plugin clamps, and the plugin imports.",
        "RUN gemmaserve turing status --capability sm_75",
        f'RUN python3 -c "{ARCH_CHECK}"',
        "",
    ])


def render_buildspec(*, dockerfile: str, base_image: str, target_image: str) -> str:
    """A CodeBuild buildspec (0.2) that logs in to both registries, builds, and pushes only on success."""
    base_registry = base_image.split("/", 1)[0]
    target_registry = target_image.split("/", 1)[0]
    encoded = base64.b64encode(dockerfile.encode()).decode()
    return "\n".join([
        "version: 0.2",
        "env:",
        "  variables:",
        f'    DOCKERFILE_B64: "{encoded}"',
        f'    TARGET_IMAGE: "{target_image}"',
        "phases:",
        "  pre_build:",
        "    commands:",
        f"      - aws ecr get-login-password --region {_registry_region(base_registry)} | docker login "
        f"--username AWS --password-stdin {base_registry}",
        f"      - aws ecr get-login-password --region {_registry_region(target_registry)} | docker login "
        f"--username AWS --password-stdin {target_registry}",
        "      - echo \"$DOCKERFILE_B64\" | base64 -d > Dockerfile",
        "  build:",
        "    on-failure: ABORT",
        "    commands:",
        "      - docker build --progress=plain -t \"$TARGET_IMAGE\" .",
        "  post_build:",
        "    commands:",
        "      - test \"$CODEBUILD_BUILD_SUCCEEDING\" = \"1\"",
        "      - docker push \"$TARGET_IMAGE\"",
        "",
    ])


def _registry_region(registry: str) -> str:
    parts = registry.split(".")
    return parts[3] if len(parts) > 3 else "us-east-1"
