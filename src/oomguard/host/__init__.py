"""``oomguard host``: the machine around the GPUs.

``facts`` reads a root tree (/proc, /sys, /dev/shm, GPU tools) into
``HostFacts``; ``requirements`` prices a launch's host RAM; ``checks`` turns
both into findings with stable ids (``findings.RULES``) and printed fixes;
``render`` prints them. Nothing here writes to the host.
"""
