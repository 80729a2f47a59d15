"""``oomguard export``: what a verified deployment needs to stay verified.

``alerts.py`` / ``grafana.py``: Prometheus alerting rules and a Grafana
dashboard in the metric names of the server's vLLM version (``names.py``).
``launch.py``: the launch as a systemd unit, docker run line, compose service,
Kubernetes Deployment, env file or vLLM ``--config`` YAML, each through its own
grammar: ``systemd.py`` (systemd's quoting and specifiers), ``shell.py``
(shell words), ``yamlout.py`` (PyYAML's safe emitter); ``fields.py`` decides
what a value may hold, ``secrets.py`` where each secret goes (the one
redactor, ``oomguard.redact``), ``resources.py`` the limits from the host-RAM
plan; ``readback.py`` parses every export back with the target's grammar.
"""
