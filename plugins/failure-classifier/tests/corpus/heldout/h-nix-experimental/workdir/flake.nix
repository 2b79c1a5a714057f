{ outputs = { self }: { x = 5; }; }
