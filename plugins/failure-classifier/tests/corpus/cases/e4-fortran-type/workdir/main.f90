program main
  implicit none
  integer :: n
  n = "twelve"
  print *, n
end program main
