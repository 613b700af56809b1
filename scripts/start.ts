/** Placeholder for the main job until the apps land (issue 7): says what `npm start` will run. */
console.log("npm start will run: an embedded PostgreSQL, the API (apps/api) and one deriver (apps/deriver).")
