package views

// DoorCount is the jobs of one front door: unfinished now, and created in the window.
type DoorCount struct {
	Door           string
	Active, Window int64
}

// DoorLabel is how the dashboard names a door.
func DoorLabel(door string) string {
	switch door {
	case "front_door":
		return "openai"
	case "":
		return ""
	}
	return door
}

// BatchProgress is a batch's progress by its requests.
type BatchProgress struct {
	ID, Status                         string
	Total, Expanded, Completed, Failed int
}
