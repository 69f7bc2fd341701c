"""The derived T4 image and the account's setup: ``dockerfile`` (Dockerfile, buildspec, build record),
``codebuild`` (build and push), ``iam`` (roles), ``jumpstart`` (the public hub's Gemma 4 entries)."""
