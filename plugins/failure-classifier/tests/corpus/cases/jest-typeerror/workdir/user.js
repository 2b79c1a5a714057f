exports.name = (u) => u.profile.name;
