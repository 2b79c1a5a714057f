from numpy_nonexistent_xyz.linalg import norm
print(norm([3, 4]))
