"""Wire-format pieces shared by both sides of a protocol: the collector and the simulator.

The simulator plays the switches and the collector reads them; neither may import the other,
yet both must write and read the same bytes. What they share lives here, and this package
imports no other fabricmon package.
"""
