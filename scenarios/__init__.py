"""The published training runs footprint ships as scenarios (YAML files beside this module).

Package data, so a bare name (``footprint assess bloom-176b``, ``footprint.assess("bloom-176b")``, the dashboard's
list) resolves in an installed footprint as in the repository: ``footprint.lca.workload.scenario_path``.
No code here.
"""
