program main
  use json_module
  implicit none
  type(json_file) :: json
  call json%initialize()
end program main
