"""The production topology on one machine (``scripts/local_deploy.sh``).

``services`` starts and stops the processes (Postgres, the GCS API emulator, Ray nodes, Dagster
services) and records them by pid; ``instance_config`` derives the Dagster instance
(``dagster.yaml``) from ``k8s/dagster-values.yaml``; ``local`` is the command line. The code
location is started as ``dagster code-server start -f definitions.py``, never imported here (this package,
like all of ``marin_resources``, does not depend on ``marin_assets``).
"""
