"""CLI commands of this area (registered on traincast.cli.app)."""
