interface User { id: number; name: string }
function greet(u: User) { return u.name; }
greet({ id: '1', name: 'a' });
