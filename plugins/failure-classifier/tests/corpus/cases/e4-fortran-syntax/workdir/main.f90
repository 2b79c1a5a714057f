program main
  implicit none
  integer :: i
  do i = 1, 3
    print *, i
end program main
