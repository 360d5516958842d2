"""The real-application test bed: Datasette, a Sphinx site and a Django admin, served on loopback
under names of their own (see docs/testbed.md)."""
