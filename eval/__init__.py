"""Tasks, ground truth, evaluators and reports. Built in a later issue."""
