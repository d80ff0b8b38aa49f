"""The one backend model of the hardware, below both the compiler and the simulator: op types and their operand
rules, kernel cycles, bandwidth limits, epoch cost, L1 footprint and TM shape math. It knows nothing of YAML."""
