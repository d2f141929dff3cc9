"""The noisy-neighbour benchmark's parts: what every process shares (`common`), the attackers'
machinery (`attacker`) and one module per load pattern (`patterns`)."""
