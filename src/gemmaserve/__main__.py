"""``python -m gemmaserve`` runs the CLI (used where the console script is not on PATH)."""

from gemmaserve.cli import main

main()
