"""``oomguard export``: what a verified deployment needs to stay verified.

``alerts.py`` / ``grafana.py``: Prometheus alerting rules and a Grafana
dashboard in the metric names of the server's vLLM version (``names.py``).
``launch.py``: the launch as a systemd unit, docker run line, compose service,
Kubernetes Deployment, env file or vLLM ``--config`` YAML (``systemd.py`` holds
systemd's quoting); ``readback.py`` reads any of them back to check the flags.
"""
