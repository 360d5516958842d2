#!/usr/bin/env python
"""Django's command-line entry point for the test bed's site (run with the test bed's venv)."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tbsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
