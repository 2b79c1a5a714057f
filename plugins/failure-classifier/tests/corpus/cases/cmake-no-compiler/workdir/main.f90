program calc
end program calc
