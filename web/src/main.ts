// Entry point. A small first script: on a comparison's URL it asks for the runs' overlay at
// once (early.ts), then imports the app (app.ts, a chunk of its own), whose fetch and compile
// overlap the server's answer instead of coming before the request; while the chunk
// downloads, it makes the first uses that cost the most once (firstuse.ts).

import "./style.css";
import { askEarly } from "./early";
import { warmFirstUses } from "./firstuse";

askEarly();
void import("./app");
warmFirstUses();
