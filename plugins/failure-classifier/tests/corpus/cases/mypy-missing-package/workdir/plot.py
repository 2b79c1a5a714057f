import matplotlib_nonexistent_xyz as m

m.show()
