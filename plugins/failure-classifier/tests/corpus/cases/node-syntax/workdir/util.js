exports.f = (x) => { return x +; };
