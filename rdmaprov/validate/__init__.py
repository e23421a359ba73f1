"""Validation engine: the all_reduce worker, thresholds and verdicts, and their launch.

``worker`` runs on the hosts (inside the validation image) and imports nothing from here;
``verdict`` runs on the control host and is pure.
"""
