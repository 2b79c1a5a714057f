select 2 + 3 as total;
