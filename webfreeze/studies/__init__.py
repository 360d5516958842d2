"""Studies: a study file (``spec``) -> a grid of ordinary runs (``run``) -> the study report (``report``)."""
